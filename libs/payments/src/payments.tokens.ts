/** Injection tokens of the payments handlers (the services are injected by their classes). */

/** The gateway's pool, as the handlers that read the read models or write plain tables (merchants, webhooks) take it. */
export const READ_MODELS = Symbol('ReadModels');
/** The event store (the operator's raw stream reads). */
export const EVENT_STORE = Symbol('EventStore');
/** The gateway clock (the API's CLOCK_TOKEN is this one). */
export const GATEWAY_CLOCK = Symbol('Clock');
