/**
 * The spec's error shape: `{ error: { code, message, param?, details? } }`. Codes are
 * the spec's and stable; messages are in Russian, for logs, not for buyers.
 */
export interface ErrorDetail {
  readonly param: string;
  readonly code: string;
  readonly message: string;
}

export interface ErrorBody {
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly param?: string;
    readonly details?: readonly ErrorDetail[];
  };
}

/**
 * The challenges a 401 carries in WWW-Authenticate (RFC 9110 requires one): the merchant
 * API's Bearer keys (HMAC mode has no Authorization scheme of its own) and the operator
 * token, each its own realm.
 */
/** The longest path of a body's field that an answer echoes (param, message, details): past it, the answer names the body. */
export const LONGEST_ECHOED_PATH = 200;

export const MERCHANT_CHALLENGE = 'Bearer realm="gateway"';
export const OPERATOR_CHALLENGE = 'Bearer realm="operator"';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param?: string,
    readonly details?: readonly ErrorDetail[],
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  body(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.param !== undefined ? { param: this.param } : {}),
        ...(this.details !== undefined ? { details: this.details } : {}),
      },
    };
  }

  static validation(details: readonly ErrorDetail[]): ApiError {
    const first = details[0]!;
    return new ApiError(400, 'validation', first.message, first.param, details);
  }

  static notFound(code = 'not_found', message = 'Ресурс не найден'): ApiError {
    return new ApiError(404, code, message);
  }

  /** A 401 of the merchant API (`code`: unauthorized, timestamp_invalid, signature_invalid) or, with OPERATOR_CHALLENGE, of the operator's routes. */
  static unauthorized(
    message: string,
    code = 'unauthorized',
    challenge = MERCHANT_CHALLENGE,
    headers: Readonly<Record<string, string>> = {},
    param?: string,
  ): ApiError {
    return new ApiError(401, code, message, param, undefined, { 'WWW-Authenticate': challenge, ...headers });
  }
}
