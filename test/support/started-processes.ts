/** The test realm's global under which startProcess lists the processes a test file started (killed at its end: test-environment.ts). */
export const STARTED_PROCESSES = '__startedProcesses';
