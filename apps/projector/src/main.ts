import { catchStopSignals } from '../../gateway/src/stop-signals';

// Caught before the rest of the gateway loads (a second or more): a signal meanwhile is a stop, exit 0.
const signals = catchStopSignals();

/** `npm run start:projector`: the projections (and, later, workers) alone. */
void import('../../gateway/src/run-process.js').then(({ runProcess }) => runProcess({ name: 'projector', api: false, projector: true }, signals));
