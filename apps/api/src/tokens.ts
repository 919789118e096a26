/** Injection tokens of the API's infrastructure. */
export const DATABASE_POOL = Symbol('DatabasePool');
export const INFRASTRUCTURE = Symbol('Infrastructure');
export const ADMIN_TOKEN = Symbol('AdminToken');
export const READINESS = Symbol('Readiness');
export const LEDGER_BOOK = Symbol('LedgerBook');
export const CLOCK_TOKEN = Symbol('Clock');
