package protocol

// Failure modes of delegate.failed (DelegateFailedPayload.FailureMode):
// why a worker a planner delegated to gave no answer.
const (
	// DelegateFailureCancelled: the planner's turn was cancelled, and
	// the worker's turn with it.
	DelegateFailureCancelled = "cancelled_by_user"
	// DelegateFailureWorker: the worker could not run, or its turn
	// ended other than completed.
	DelegateFailureWorker = "worker_error"
	// DelegateFailureTimeout: the worker's turn ran longer than the
	// delegate tool's timeout and was cancelled.
	DelegateFailureTimeout = "timeout"
	// DelegateFailureInterrupted: the process running the delegation
	// stopped mid-way (a crash, or in cluster mode a lost owner node),
	// and crash recovery ended the planner's turn with the worker's
	// (turn.cancelled, phase interrupted). The delegation is not
	// resumed.
	DelegateFailureInterrupted = "interrupted"
)
