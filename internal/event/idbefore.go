package event

// IDBefore returns the id one below id (an event id): no id lies
// between the two, so "every event with an id after IDBefore(x)" is
// "every event from x on". It fails for what is not an event id, and
// for the smallest id of all, which has none before it.
func IDBefore(id string) (string, error) {
	u, err := ParseID(id)
	if err != nil {
		return "", err
	}
	for i := len(u) - 1; i >= 0; i-- {
		u[i]--
		if u[i] != 0xff {
			return IDPrefix + u.String(), nil
		}
	}
	return "", errNoIDBefore
}
