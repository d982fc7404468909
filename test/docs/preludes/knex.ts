// `knex`: the application's Knex instance on PostgreSQL.
import type { Knex as PreludeKnex } from 'knex';

export declare const knex: PreludeKnex;
