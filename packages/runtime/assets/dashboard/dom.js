// @ts-check
/* The asynccmd dashboard: DOM helpers that make elements and text, never HTML (see app.js). Values from the table go on the page as text only. */

// As core's COMMAND_STATUSES: WAITING (for its dependencies) first.
export const STATUSES = ['WAITING', 'PENDING', 'RUNNING', 'SUCCESS', 'DEAD', 'CANCELLED'];

/** @param {string} id */
export function $(id) {
  const found = document.getElementById(id);
  if (found === null) throw new Error(`the page lacks #${id}`);
  return found;
}

/**
 * An element with attributes we choose and children that are elements or text.
 * @param {string} tag
 * @param {Record<string, string>} [attrs]
 * @param {...(Node | string | number | null | undefined)} children
 * @returns {HTMLElement}
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
  return node;
}

const SVG = 'http://www.w3.org/2000/svg';
/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
export function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

/**
 * @param {HTMLElement} parent
 * @param {...Node} children
 */
export function fill(parent, ...children) {
  parent.replaceChildren(...children);
}

/** A link inside this page, to a command's detail. @param {string} id */
export function commandLink(id) {
  return el('a', { href: `#/commands/${encodeURIComponent(id)}` }, id);
}

/** @param {string} status */
export function statusBadge(status) {
  return el('span', { class: `badge status-${STATUSES.includes(status) ? status : 'unknown'}` }, status);
}

/** @param {unknown} value */
export function show(value) {
  if (value === null || value === undefined) return '–';
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

/** @param {string | null | undefined} iso */
export function time(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.floor(s % 60)}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

let toastTimer = 0;
/** @param {string} text */
export function toast(text) {
  const t = $('toast');
  t.textContent = text;
  t.hidden = false;
  window.clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => (t.hidden = true), 5000);
}

/** @param {string} s */
export function capitalise(s) {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/**
 * A progress as a bar and in words: "3 of 10 (30%)".
 * @param {{ done: number, total: number }} p
 */
export function progressView(p) {
  const words = `${p.done} of ${p.total} (${Math.floor((p.done / p.total) * 100)}%)`;
  return el(
    'span',
    { class: 'progress' },
    // Spaced by the style: the words are the element's only text.
    el('progress', { max: String(p.total), value: String(p.done), title: words }),
    words,
  );
}
