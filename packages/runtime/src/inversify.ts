// @asynccmd/runtime/inversify: asynccmd bound into an inversify container. Importing it loads
// inversify and reflect-metadata (which installs its global Reflect API, as inversify needs).
export { asyncCommandModule, AsyncCommandTokens } from './container-module.js';
export type { AsyncCommandModuleOptions } from './container-module.js';
