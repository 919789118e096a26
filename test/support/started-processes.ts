/** The test realm's global under which startProcess lists the processes a test file started (killed at its end: test-environment.ts). */
export const STARTED_PROCESSES = '__startedProcesses';

/**
 * The test realm's global holding the file's own data folder: the DATA_DIR of every process
 * it starts without one (gateway-process.ts), removed at its end (test-environment.ts).
 */
export const FILE_DATA_DIR = '__fileDataDir';
