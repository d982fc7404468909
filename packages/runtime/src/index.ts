export {};
export * from './ops/index.js';
