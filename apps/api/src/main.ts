import { runProcess } from '../../gateway/src/run-process';

/** `npm run start:api`: the merchant and operator HTTP API alone (projector runs apart). */
void runProcess({ name: 'api', api: true, projector: false });
