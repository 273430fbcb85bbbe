// The dashboard's one Api instance (same origin).
import { Api } from '../client/index';

export const api = new Api();
