import type { Migration } from './migrate';
import { eventStoreMigration } from '../../event-store/src/postgres/schema';

/** Every schema change of the gateway, in version order. Never edit an applied one: add a new one. */
export const allMigrations: readonly Migration[] = [eventStoreMigration];
