// @ts-check
/* The asynccmd dashboard: what its parts share (see app.js). */

/** The page's state. */
export const page = {
  /** The last summary read. @type {any} */
  summary: null,
  /** Bumped by every navigation: a view whose answers arrive after the next one was asked for draws nothing. */
  generation: 0,
};

/** What a part of the page asks of the whole once something changed (app.js gives them their work). */
export const refresh = {
  /** Reads the summary again now, and draws the overview. */
  overview: () => {},
  /** Draws the view in the address again. */
  view: () => {},
};
