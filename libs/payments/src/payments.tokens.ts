/** Injection tokens of the payments handlers (the services are injected by their classes). */

/** The pool the query handlers read the read models through. */
export const READ_MODELS = Symbol('ReadModels');
/** The event store (the operator's raw stream reads). */
export const EVENT_STORE = Symbol('EventStore');
