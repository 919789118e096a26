import { runProcess } from './run-process';

/** `npm start`: API, projector and workers in one process. */
void runProcess({ name: 'gateway', api: true, projector: true });
