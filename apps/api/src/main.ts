import { catchStopSignals } from '../../gateway/src/stop-signals';

// Caught before the rest of the gateway loads (a second or more): a signal meanwhile is a stop, exit 0.
const signals = catchStopSignals();

/** `npm run start:api`: the merchant and operator HTTP API alone (projector runs apart). */
void import('../../gateway/src/run-process.js').then(({ runProcess }) => runProcess({ name: 'api', api: true, projector: false }, signals));
