import { runProcess } from '../../gateway/src/run-process';

/** `npm run start:projector`: the projections (and, later, workers) alone. */
void runProcess({ name: 'projector', api: false, projector: true });
