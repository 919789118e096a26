/**
 * Every refusal of the gateway's decisions (the deciders', the ledger's, the payment
 * flows'): the spec's error code, a message for the client and, where one field is at
 * fault, its name. What HTTP status a code answers with is the API's to say, in one
 * place (`toApiError` in apps/api/src/http/errors/error.filter.ts).
 */
export class Refusal<Code extends string = string> extends Error {
  constructor(
    readonly code: Code,
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'Refusal';
  }
}
