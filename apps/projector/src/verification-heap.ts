/**
 * Node's flags for the verification commands (`ledger:verify`, `log:verify`; decision
 * 0123). What they hold does not grow with the log (decision 0123), but with
 * V8's defaults their peak RSS still did: the young generation grows to 16 MB
 * semi-spaces in a long run, and the old generation is collected only when it has grown
 * to several times what was live. These flags make V8 collect in step with what the
 * verification holds: semi-spaces of 4 MB, and a full collection once the old generation
 * has grown by a quarter. They cap nothing: a gateway with more ledgers gets a larger
 * heap, collected as often. The npm scripts pass them (a test checks it); the bench runs the scripts.
 */
export const VERIFICATION_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=25'];
