// A small Markdown renderer that builds DOM nodes (never HTML strings), so
// nothing a model or a person writes can inject markup. It covers what chat
// replies use: fenced code, inline code, bold, italics, links, headings,
// lists, quotes and line breaks.

import { h } from './util.js';

export function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = h('p');
    para.forEach((l, j) => {
      if (j) p.append(h('br'));
      p.append(...inline(l));
    });
    frag.append(p);
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)\s*$/);
    if (fence) {
      flush();
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++; // closing fence (or end of a still-streaming text)
      const code = h('code', fence[2] ? { 'data-lang': fence[2] } : null, body.join('\n'));
      frag.append(h('pre', { class: 'code' }, code));
      continue;
    }
    const head = line.match(/^(#{1,4})\s+(.*)$/);
    if (head) {
      flush();
      frag.append(h('h' + Math.min(6, head[1].length + 2), null, ...inline(head[2])));
      i++;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      flush();
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
        const l = lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, '');
        const task = l.match(/^\[( |x|X)\]\s+(.*)$/);
        list.append(task ? h('li', { class: 'task' }, task[1] === ' ' ? '☐ ' : '☑ ', ...inline(task[2])) : h('li', null, ...inline(l)));
        i++;
      }
      frag.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      flush();
      const q = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) q.push(lines[i++].replace(/^>\s?/, ''));
      const bq = h('blockquote');
      bq.append(renderMarkdown(q.join('\n')));
      frag.append(bq);
      continue;
    }
    if (!line.trim()) {
      flush();
      i++;
      continue;
    }
    para.push(line);
    i++;
  }
  flush();
  return frag;
}

// Inline spans, earliest match first.
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|(?<![\w])_([^_\s][^_]*)_(?![\w])|\[([^\]]+)\]\((https?:\/\/[^\s)]+|mailto:[^\s)]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/;

export function inline(text) {
  const out = [];
  let s = text;
  while (s) {
    const m = s.match(INLINE);
    if (!m) { out.push(s); break; }
    if (m.index) out.push(s.slice(0, m.index));
    if (m[1]) out.push(h('code', null, m[2]));
    else if (m[3] || m[4]) out.push(h('strong', null, ...inline(m[3] || m[4])));
    else if (m[5] || m[6]) out.push(h('em', null, ...inline(m[5] || m[6])));
    else if (m[7]) out.push(link(m[8], inline(m[7])));
    else if (m[9]) out.push(link(m[9], [m[9]]));
    s = s.slice(m.index + m[0].length);
  }
  return out;
}

function link(href, children) {
  return h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, ...children);
}

/** highlight wraps the query's words in <mark> inside plain text. */
export function highlight(text, query) {
  const words = String(query || '').toLowerCase().split(/\s+/).filter((w) => w.length > 1);
  if (!words.length) return [text];
  const re = new RegExp('(' + words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|') + ')', 'gi');
  return String(text).split(re).map((part, i) => (i % 2 ? h('mark', null, part) : part));
}
