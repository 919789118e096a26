import { catchStopSignals } from './stop-signals';

// Caught before the rest of the gateway loads (a second or more): a signal meanwhile is a stop, exit 0.
const signals = catchStopSignals();

/** `npm start`: API, projector and workers in one process. */
void import('./run-process.js').then(({ runProcess }) => runProcess({ name: 'gateway', api: true, projector: true }, signals));
