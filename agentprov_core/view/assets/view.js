/* agentprov view: the page's script (docs/view.md).
 *
 * Everything a corpus holds was written by a model or an attacker: it is put into the page
 * with textContent and createElement only, never as HTML. The only links are the site's own
 * (#/..., files/..., raw/...). Data files are scripts beside this one that call APV.site,
 * APV.list and APV.x: they load from file:// and over --serve alike; nothing is fetched. */
(function () {
  'use strict';
  var APV = window.APV = {};
  var S = {site: null, list: null, rows: [], col: {}, docs: {}, waiting: {}, asked: {},
           shown: [], cursor: 0, filters: {}, q: '', limit: 500, current: null};
  var FILTERS = ['corpus', 'suite', 'user_task', 'attack', 'defence', 'model', 'status',
                 'session', 'verify', 'issues'];
  var SHOWN = ['id', 'corpus', 'suite', 'user_task', 'injection_task', 'attack', 'defence',
               'model', 'status', 'utility', 'security', 'issues', 'verify'];

  function $(id) { return document.getElementById(id); }

  function safeHref(h) {
    return /^(#\/[A-Za-z0-9\/_.-]*|files\/[0-9]+\/[a-z]+\.json\.txt|raw\/[0-9a-f]{64}\.txt)$/.test(h) ? h : '#/';
  }

  /* el('div', {class: 'x', text: 't', href: '#/'}, [children]) */
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    attrs = attrs || {};
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null) return;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'class') e.className = v;
      else if (k === 'href') e.setAttribute('href', safeHref(String(v)));
      else e.setAttribute(k, String(v));
    });
    (kids || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }

  function arr(v) { return Array.isArray(v) ? v : []; }
  function obj(v) { return v && typeof v === 'object' && !Array.isArray(v) ? v : {}; }

  function str(v) {
    if (v === null || v === undefined) return 'none';
    if (typeof v === 'string') return v;
    try { return JSON.stringify(v, null, 2); } catch (err) { return String(v); }
  }

  /* An injection's text as a pattern that matches it whatever its whitespace: a tool
   * renders the injected text into its own output (a file, an e-mail, a web page) and
   * may fold its blank lines or indent it. Its words are matched literally. */
  var patterns = new WeakMap();
  function injectionPatterns(injections) {
    if (!injections) return [];
    if (patterns.has(injections)) return patterns.get(injections);
    var out = [];
    Object.keys(injections).forEach(function (k) {
      var t = injections[k];
      if (typeof t !== 'string') return;
      var words = t.trim().split(/\s+/).filter(function (w) { return w; });
      if (!words.length || t.trim().length < 4) return;
      var src = words.map(function (w) { return w.replace(/[.*+?^${}()|[\]\\\/]/g, '\\$&'); }).join('\\s+');
      out.push([k, new RegExp(src)]);
    });
    patterns.set(injections, out);
    return out;
  }

  /* text with every occurrence of an injection's text marked */
  function marked(text, injections) {
    var frag = document.createDocumentFragment();
    var inj = injectionPatterns(injections);
    var rest = String(text);
    while (rest.length) {
      var best = null, which = null;
      for (var i = 0; i < inj.length; i++) {
        var m = inj[i][1].exec(rest);
        if (m && (best === null || m.index < best.index)) { best = m; which = inj[i]; }
      }
      if (best === null || best[0].length === 0) { frag.appendChild(document.createTextNode(rest)); break; }
      if (best.index > 0) frag.appendChild(document.createTextNode(rest.slice(0, best.index)));
      frag.appendChild(el('mark', {class: 'inj', title: 'injection (vector ' + which[0] + ')',
                                   text: best[0]}));
      rest = rest.slice(best.index + best[0].length);
    }
    return frag;
  }

  function pre(v, doc, cls) {
    var p = el('pre', {class: cls || 'val'});
    p.appendChild(marked(str(v), doc ? doc.injections : null));
    return p;
  }

  function restrictedBox(doc, node) {
    if (!doc.restricted) return node;
    return el('details', {class: 'restricted'}, [
      el('summary', {text: 'Warning: restricted-use content (this corpus holds prompts that ' +
                           'ask for harm). Open to read it.'}), node]);
  }

  /* ------------------------------------------------------------------ loading */
  function load(key, src, cb) {
    if (key === 'list' && S.list) return cb();
    if (key !== 'list' && S.docs[key] !== undefined) return cb();
    (S.waiting[key] = S.waiting[key] || []).push(cb);
    if (S.asked[key]) return;
    S.asked[key] = true;
    var s = document.createElement('script');
    s.src = src;
    s.onerror = function () {
      S.asked[key] = false;
      S.waiting[key] = [];
      showError('could not load ' + src + ': the site has no such file');
    };
    document.head.appendChild(s);
  }
  function done(key) {
    var w = S.waiting[key] || [];
    S.waiting[key] = [];
    w.forEach(function (cb) { cb(); });
  }
  APV.site = function (d) { S.site = d; };
  APV.list = function (d) {
    S.list = d;
    d.columns.forEach(function (c, i) { S.col[c] = i; });
    S.rows = d.rows;
    done('list');
  };
  APV.x = function (n, d) { S.docs[n] = d; done(n); };
  function cell(row, c) { return S.list.values[row[S.col[c]]]; }
  function loadDoc(n, cb) { load(n, 'x/' + n + '.js', function () { cb(S.docs[n]); }); }

  function showError(msg) {
    var sec = S.current ? $(S.current) : null;
    if (sec) { sec.textContent = ''; sec.appendChild(el('p', {class: 'bad', id: 'load-error', text: msg})); }
  }

  /* ------------------------------------------------------------------ routing */
  function show(id) {
    ['overview', 'list', 'exec', 'cmp'].forEach(function (r) { $(r).hidden = r !== id; });
    S.current = id;
  }
  function route() {
    var h = location.hash || '#/';
    var m;
    if ((m = /^#\/x\/([0-9]+)$/.exec(h))) { openExec(Number(m[1])); return; }
    if ((m = /^#\/cmp\/([0-9]+)\/([0-9]+)$/.exec(h))) { openCmp(Number(m[1]), Number(m[2])); return; }
    if (h.indexOf('#/list') === 0) { openList(); return; }
    show('overview');
  }

  /* ------------------------------------------------------------------ the list */
  function distinct(c) {
    var seen = {};
    S.rows.forEach(function (r) {
      var v = cell(r, c);
      (c === 'issues' ? v.split(' ') : [v]).forEach(function (x) { if (x) seen[x] = 1; });
    });
    return Object.keys(seen).sort();
  }
  function matches(r) {
    for (var i = 0; i < FILTERS.length; i++) {
      var f = FILTERS[i], want = S.filters[f];
      if (!want) continue;
      var v = cell(r, f);
      if (f === 'issues' ? (' ' + v + ' ').indexOf(' ' + want + ' ') < 0 : v !== want) return false;
    }
    if (S.q) {
      var q = S.q.toLowerCase();
      var hay = S.list.columns.map(function (c) { return cell(r, c); }).join(' ').toLowerCase();
      if (hay.indexOf(q) < 0) return false;
    }
    return true;
  }
  function filter() {
    S.shown = [];
    for (var i = 0; i < S.rows.length; i++) if (matches(S.rows[i])) S.shown.push(i);
    if (S.cursor >= S.shown.length) S.cursor = Math.max(0, S.shown.length - 1);
  }
  function buildList() {
    var sec = $('list');
    sec.textContent = '';
    sec.appendChild(el('h2', {text: 'Executions'}));
    var bar = el('div', {class: 'filters'});
    var search = el('input', {id: 'search', type: 'search', placeholder: 'search (/)',
                              'aria-label': 'search the executions'});
    search.value = S.q;
    search.addEventListener('input', function () { S.q = search.value; filter(); renderRows(); });
    bar.appendChild(search);
    FILTERS.forEach(function (f) {
      var sel = el('select', {id: 'f-' + f, 'aria-label': f}, [el('option', {value: '', text: f + ': all'})]);
      distinct(f).forEach(function (v) {
        var o = el('option', {value: v, text: v});
        if (S.filters[f] === v) o.selected = true;
        sel.appendChild(o);
      });
      sel.addEventListener('change', function () { S.filters[f] = sel.value; filter(); renderRows(); });
      bar.appendChild(sel);
    });
    sec.appendChild(bar);
    sec.appendChild(el('p', {id: 'count', class: 'muted'}));
    var t = el('table', {class: 'list', id: 'exec-table'});
    t.appendChild(el('thead', {}, [el('tr', {}, SHOWN.map(function (c) { return el('th', {text: c}); }))]));
    t.appendChild(el('tbody', {id: 'rows'}));
    sec.appendChild(t);
    sec.appendChild(el('button', {id: 'more', type: 'button', text: 'show more'}));
    $('more').addEventListener('click', function () { S.limit += 500; renderRows(); });
  }
  function renderRows() {
    var body = $('rows');
    body.textContent = '';
    var n = Math.min(S.shown.length, S.limit);
    for (var k = 0; k < n; k++) {
      var i = S.shown[k], r = S.rows[i];
      var tr = el('tr', {'data-n': i, class: k === S.cursor ? 'cursor' : ''});
      SHOWN.forEach(function (c) {
        var v = cell(r, c);
        var td = c === 'id' ? el('td', {}, [el('a', {href: '#/x/' + i, text: v})])
                            : el('td', {text: v, class: 'c-' + c + ' v-' + v.split(' ')[0]});
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
    $('count').textContent = S.shown.length + ' of ' + S.rows.length + ' execution(s)' +
      (S.shown.length > n ? ' (the first ' + n + ' shown)' : '');
    $('more').hidden = S.shown.length <= n;
  }
  function openList() {
    show('list');
    load('list', 'data/list.js', function () {
      if (!$('rows')) { filter(); buildList(); }
      renderRows();
    });
  }
  function moveCursor(d) {
    if (!S.shown.length) return;
    S.cursor = Math.min(S.shown.length - 1, Math.max(0, S.cursor + d));
    if (S.cursor >= S.limit) S.limit += 500;  /* the cursor's row is always rendered */
    if (S.current === 'list') {
      renderRows();
      var c = document.querySelector('#rows tr.cursor');
      if (c) c.scrollIntoView({block: 'nearest'});
    } else if (S.current === 'exec') {
      location.hash = '#/x/' + S.shown[S.cursor];
    }
  }

  /* ------------------------------------------------------------------ one execution */
  function kv(pairs) {
    var dl = el('dl', {class: 'kv'});
    pairs.forEach(function (p) {
      dl.appendChild(el('dt', {text: p[0]}));
      dl.appendChild(el('dd', {text: str(p[1]), class: 'v-' + String(p[1]).split(' ')[0]}));
    });
    return dl;
  }
  function message(m, doc) {
    var role = m && m.role ? String(m.role) : 'message';
    var box = el('div', {class: 'msg r-' + role.replace(/[^a-z]/g, '')}, [el('span', {class: 'role', text: role})]);
    var content = m ? m.content : null;
    if (Array.isArray(content)) content = content.map(function (p) { return p && p.text !== undefined ? p.text : p; });
    if (content !== null && content !== undefined && content !== '') {
      box.appendChild(pre(Array.isArray(content) && content.every(function (x) { return typeof x === 'string'; }) ? content.join('\n') : content, doc));
    }
    var calls = arr(m && m.tool_calls);
    calls.forEach(function (c) {
      var fn = c.function && typeof c.function === 'object' ? c.function.name : c.function;
      var args = c.function && typeof c.function === 'object' ? c.function.arguments : c.arguments;
      box.appendChild(el('div', {class: 'tc'}, [el('span', {class: 'fn', text: 'calls ' + str(fn)}), pre(args, doc, 'args')]));
    });
    if (m && m.tool_call_id) box.appendChild(el('span', {class: 'muted', text: ' (answers ' + m.tool_call_id + ')'}));
    return box;
  }
  function step(s, i, doc) {
    var kind = s.kind || 'record';
    var cls = 'step k-' + kind + (s.aux ? ' aux' : '') + (s.denied ? ' denied' : '');
    var head = el('div', {class: 'head'}, [el('span', {class: 'num', text: String(i + 1)})]);
    var box = el('div', {class: cls}, [head]);
    if (s.aux) head.appendChild(el('span', {class: 'badge aux', text: kind === 'model_call' ? 'auxiliary call: ' + s.actor : 'defence: ' + s.actor}));
    if (kind === 'model_call') {
      head.appendChild(el('span', {class: 'title', text: 'model call ' + s.call_id + ' · ' + str(s.element) + ' · ' + str(s.status) + (s.retries ? ' · ' + s.retries + ' retries' : '')}));
      var sent = arr(s.sent);
      if (sent.length) {
        var msgs = el('div', {class: 'sent'}, [el('div', {class: 'label', text: str(s.sent_label)})]);
        sent.forEach(function (m) { msgs.appendChild(message(m, doc)); });
        box.appendChild(restrictedBox(doc, msgs));
      } else {
        box.appendChild(el('div', {class: 'label muted', text: str(s.sent_label)}));
      }
      var reply = el('div', {class: 'reply'}, [el('div', {class: 'label', text: 'reply'})]);
      reply.appendChild(s.reply ? message(s.reply, doc) : el('span', {class: 'muted', text: 'no reply'}));
      box.appendChild(reply);
      if (s.error_type) box.appendChild(el('p', {class: 'bad', text: 'error: ' + s.error_type}));
    } else if (kind === 'tool_call') {
      head.appendChild(el('span', {class: 'title', text: 'tool call ' + s.function + (s.denied ? ' (denied by the defence)' : '')}));
      box.appendChild(el('div', {class: 'label', text: 'arguments'}));
      box.appendChild(pre(s.arguments, doc, 'args'));
      if (s.error) { box.appendChild(el('div', {class: 'label', text: 'error'})); box.appendChild(pre(s.error, doc)); }
      if (!s.denied) { box.appendChild(el('div', {class: 'label', text: 'result'})); box.appendChild(pre(s.result, doc, 'result')); }
    } else if (kind === 'decision' || kind === 'note') {
      head.appendChild(el('span', {class: 'title', text: kind + ' ' + s.code}));
      if (s.text) box.appendChild(pre(s.text, doc));
      if (s.data && Object.keys(s.data).length) {
        var d = el('details', {}, [el('summary', {text: 'data'}), pre(s.data, doc)]);
        box.appendChild(d);
      }
    } else if (kind === 'environment_digest') {
      head.appendChild(el('span', {class: 'title', text: 'environment digest ' + s.name + ': ' + s.sha256 +
        (s.method ? ' (' + s.method + (s.omitted ? ', ' + s.omitted.length + ' value(s) left out' : '') + ')' : '')}));
    } else {
      head.appendChild(el('span', {class: 'title', text: kind}));
      box.appendChild(pre(s, doc));
    }
    return box;
  }
  function title(doc) {
    var t = obj(obj(doc.header).task);
    return [t.suite, t.user_task_id, t.injection_task_id || 'benign', t.attack || 'no attack', t.defense_id].map(str).join(' · ');
  }
  function evidence(doc) {
    var v = doc.verify || {verdict: 'unverified', findings: []};
    v.findings = arr(v.findings);
    var sec = el('section', {class: 'evidence', id: 'evidence'}, [el('h3', {text: 'Evidence'})]);
    sec.appendChild(el('p', {}, ['verify: ', el('span', {class: 'verdict v-' + v.verdict, id: 'verdict', text: v.verdict})]));
    if (v.findings.length) {
      sec.appendChild(el('ul', {class: 'findings'}, v.findings.map(function (f) {
        return el('li', {class: 'f-' + f.kind, text: f.kind + ': ' + f.code + ' at ' + f.path + ': ' + f.message});
      })));
    }
    var t = el('table', {class: 'files'}, [el('tr', {}, ['file', 'stored at', 'sha256', 'bytes'].map(function (h) { return el('th', {text: h}); }))]);
    arr(doc.files).forEach(function (f) {
      var link = f.copied ? el('a', {href: f.href, text: f.name}) : el('span', {text: f.name + ' (not copied: ' + str(f.why) + ')'});
      t.appendChild(el('tr', {}, [el('td', {}, [link, f.redacted ? el('span', {class: 'warn', text: ' redacted copy'}) : null]),
                                  el('td', {text: str(f.path)}), el('td', {class: 'sha', text: str(f.sha256)}),
                                  el('td', {text: f.bytes === undefined ? '' : String(f.bytes)})]));
    });
    sec.appendChild(t);
    var g = doc.prov || {nodes: [], edges: []};
    var prov = el('details', {class: 'prov', id: 'prov'}, [el('summary', {text: 'PROV graph: ' + g.nodes.length + ' node(s), ' + g.edges.length + ' edge(s)'})]);
    if (g.nodes.length) prov.appendChild(provSvg(g, encodeURIComponent(String(doc.id))));
    prov.appendChild(el('ul', {class: 'nodes'}, g.nodes.map(function (n) { return el('li', {text: n[1] + ' ' + n[0] + (n[2] ? ' (' + n[2] + ')' : '')}); })));
    prov.appendChild(el('ul', {class: 'edges'}, g.edges.map(function (e) { return el('li', {text: e[1] + ' —' + e[0] + '→ ' + e[2]}); })));
    sec.appendChild(prov);
    if (doc.ledger) sec.appendChild(el('details', {}, [el('summary', {text: 'ledger entry'}), pre(doc.ledger, null)]));
    (doc.notes || []).forEach(function (n) { sec.appendChild(el('p', {class: 'muted', text: n})); });
    return sec;
  }
  /* The PROV graph drawn: agents, activities and entities in three columns, each
   * relation a line between its two ends, every label set as text. */
  var SVGNS = 'http://www.w3.org/2000/svg';
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function provSvg(g, eid) {
    var cols = {agent: 0, activity: 1, entity: 2}, colW = 330, rowH = 26, pad = 10;
    var at = {}, count = [0, 0, 0];
    g.nodes.forEach(function (n) {
      var c = cols[n[1]] === undefined ? 2 : cols[n[1]];
      at[n[0]] = [pad + c * colW, pad + 20 + count[c] * rowH];
      count[c] += 1;
    });
    var h = pad * 2 + 20 + Math.max.apply(null, count) * rowH;
    var svg = svgEl('svg', {class: 'provsvg', width: colW * 3, height: h, viewBox: '0 0 ' + (colW * 3) + ' ' + h});
    ['agents', 'activities', 'entities'].forEach(function (t, i) {
      svg.appendChild(svgEl('text', {x: pad + i * colW, y: 14, 'font-size': 12, 'font-weight': 'bold'}, t));
    });
    g.edges.forEach(function (e) {
      var a = at[e[1]], b = at[e[2]];
      if (!a || !b) return;
      var d, ya = a[1] + 7, yb = b[1] + 7;
      if (a[0] === b[0]) {  /* the same column: a curve on its right */
        var bulge = a[0] + 240 + Math.min(50, 10 + Math.abs(yb - ya) / 6);
        d = 'M' + (a[0] + 240) + ' ' + ya + ' C' + bulge + ' ' + ya + ' ' + bulge + ' ' + yb + ' ' + (b[0] + 240) + ' ' + yb;
      } else {  /* from the right side of the left box to the left side of the right one */
        var l = a[0] < b[0] ? a : b, r = a[0] < b[0] ? b : a;
        var yl = l[1] + 7, yr = r[1] + 7, mid = (l[0] + 240 + r[0]) / 2;
        d = 'M' + (l[0] + 240) + ' ' + yl + ' C' + mid + ' ' + yl + ' ' + mid + ' ' + yr + ' ' + r[0] + ' ' + yr;
      }
      var line = svgEl('path', {d: d, fill: 'none', stroke: '#9aa3b2', 'stroke-width': 1});
      line.appendChild(svgEl('title', {}, e[1] + ' ' + e[0] + ' ' + e[2]));
      svg.appendChild(line);
    });
    var fills = {agent: '#f3e8fb', activity: '#e7effd', entity: '#e9f6ec'};
    g.nodes.forEach(function (n) {
      var p = at[n[0]];
      var grp = svgEl('g', {class: 'pnode'});
      grp.appendChild(svgEl('rect', {x: p[0], y: p[1] - 4, width: 240, height: 22, rx: 4, fill: fills[n[1]] || '#eee', stroke: '#8a93a3'}));
      var label = n[0].replace(/^.*?:/, '').replace(eid + '/', '');
      if (label.length > 36) label = '…' + label.slice(-35);
      grp.appendChild(svgEl('text', {x: p[0] + 6, y: p[1] + 11, 'font-size': 11}, label));
      grp.appendChild(svgEl('title', {}, n[1] + ' ' + n[0] + (n[2] ? ' (' + n[2] + ')' : '')));
      svg.appendChild(grp);
    });
    return svg;
  }
  function peers(n, cb) {
    load('list', 'data/list.js', function () {
      var mine = cell(S.rows[n], 'cell');
      var out = [];
      S.rows.forEach(function (r, i) { if (i !== n && cell(r, 'cell') === mine) out.push(i); });
      cb(out);
    });
  }
  function renderExec(n, doc) {
    var sec = $('exec');
    sec.textContent = '';
    var o = obj(doc.outcome);
    var h = obj(doc.header);
    var agent = obj(h.agent);
    sec.appendChild(el('h2', {}, [el('span', {class: 'eid', id: 'exec-id', text: doc.id}), ' ', el('span', {class: 'muted', text: title(doc)})]));
    if (doc.error) sec.appendChild(el('p', {class: 'bad', id: 'exec-error', text: doc.error}));
    var nav = el('p', {class: 'peers', id: 'peers'}, [el('a', {href: '#/list', text: '← list'})]);
    sec.appendChild(nav);
    peers(n, function (ps) {
      if (!ps.length) { nav.appendChild(el('span', {class: 'muted', text: ' · no other attempt of this cell'})); return; }
      nav.appendChild(document.createTextNode(' · compare with another attempt of this cell: '));
      ps.slice(0, 20).forEach(function (p) { nav.appendChild(el('a', {href: '#/cmp/' + n + '/' + p, class: 'peer', text: cell(S.rows[p], 'id') + ' (' + cell(S.rows[p], 'corpus') + ')'})); nav.appendChild(document.createTextNode(' ')); });
    });
    var issues = arr(o.issues).map(function (i) { return i.code + (i.detail ? ': ' + i.detail : ''); });
    var lvn = o.live_vs_native;
    sec.appendChild(el('section', {class: 'outcome', id: 'outcome'}, [el('h3', {text: 'Outcome'}), kv([
      ['status', o.status], ['session', o.session_status], ['utility', o.utility], ['security (attack succeeded)', o.security],
      ['payload reached the model (A13)', doc.payload ? doc.payload.replace('_', ' ') : 'not an attacked cell'],
      ['issues', issues.length ? issues.join('; ') : 'none'],
      ['live vs native', lvn ? (lvn.checked ? (lvn.agree ? 'agree' : 'disagree: ' + arr(lvn.differences).join('; ')) : 'not checked: ' + str(lvn.reason)) : 'none'],
      ['reason', o.reason], ['model', agent.model], ['endpoint', agent.endpoint_kind], ['mode', h.mode], ['corpus', doc.corpus ? doc.corpus.id : '']])]));
    var actors = arr(h.actors);
    if (actors.length) sec.appendChild(kv(actors.map(function (a) { return ['actor ' + a.id, a.kind + ' ' + a.name]; })));
    var ut = el('section', {class: 'usertask'}, [el('h3', {text: 'User task'})]);
    ut.appendChild(restrictedBox(doc, doc.user_task ? pre(doc.user_task, doc, 'val prompt') : el('p', {class: 'muted', text: 'not recorded apart from the messages below'})));
    sec.appendChild(ut);
    var inj = Object.keys(doc.injections || {});
    if (inj.length) {
      var is = el('section', {class: 'injections', id: 'injections'}, [el('h3', {text: 'Injections (marked where they entered)'})]);
      inj.forEach(function (k) { is.appendChild(el('div', {class: 'injvec'}, [el('span', {class: 'fn', text: k}), pre(doc.injections[k], doc)])); });
      sec.appendChild(is);
    }
    var st = el('section', {class: 'steps', id: 'steps'}, [el('h3', {text: 'Trajectory (' + arr(doc.steps).length + ' record(s))'})]);
    arr(doc.steps).forEach(function (s, i) { st.appendChild(step(s, i, doc)); });
    sec.appendChild(st);
    sec.appendChild(evidence(doc));
  }
  function openExec(n) {
    show('exec');
    $('exec').textContent = 'loading…';
    loadDoc(n, function (doc) {
      renderExec(n, doc);
      load('list', 'data/list.js', function () {
        if (!S.shown.length && !S.q) filter();
        var k = S.shown.indexOf(n);
        if (k >= 0) S.cursor = k;
      });
      window.scrollTo(0, 0);
    });
  }

  /* ------------------------------------------------------------------ side by side */
  function openCmp(a, b) {
    show('cmp');
    var sec = $('cmp');
    sec.textContent = 'loading…';
    loadDoc(a, function (da) {
      loadDoc(b, function (db) {
        sec.textContent = '';
        sec.appendChild(el('h2', {text: 'Side by side: ' + title(da)}));
        var grid = el('div', {class: 'cmpgrid', id: 'cmpgrid'});
        [[a, da], [b, db]].forEach(function (p) {
          var o = obj(p[1].outcome);
          grid.appendChild(el('div', {class: 'cmphead'}, [el('a', {href: '#/x/' + p[0], text: p[1].id}),
            el('span', {class: 'muted', text: ' ' + (p[1].corpus ? p[1].corpus.id : '') + ' · attempt ' + str(obj(obj(p[1].header).task).attempt) + ' · ' + str(o.status) + ' · utility ' + str(o.utility) + ' · security ' + str(o.security) + ' · verify ' + (p[1].verify || {}).verdict})]));
        });
        var sa = arr(da.steps), sb = arr(db.steps);
        for (var i = 0; i < Math.max(sa.length, sb.length); i++) {
          grid.appendChild(i < sa.length ? step(sa[i], i, da) : el('div', {class: 'step none', text: '(no step ' + (i + 1) + ')'}));
          grid.appendChild(i < sb.length ? step(sb[i], i, db) : el('div', {class: 'step none', text: '(no step ' + (i + 1) + ')'}));
        }
        sec.appendChild(grid);
      });
    });
  }

  /* ------------------------------------------------------------------ keys */
  function onKey(e) {
    var t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA')) {
      if (e.key === 'Escape') t.blur();
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var arrows = S.current === 'list';  /* elsewhere the arrows scroll the page */
    if (e.key === 'j' || (arrows && e.key === 'ArrowDown')) { moveCursor(1); e.preventDefault(); }
    else if (e.key === 'k' || (arrows && e.key === 'ArrowUp')) { moveCursor(-1); e.preventDefault(); }
    else if (e.key === 'Enter' && S.current === 'list' && S.shown.length) { location.hash = '#/x/' + S.shown[S.cursor]; }
    else if (e.key === '/') {
      e.preventDefault();
      if (S.current !== 'list') location.hash = '#/list';
      var focus = function () { var s = $('search'); if (s) s.focus(); else setTimeout(focus, 20); };
      focus();
    }
    else if (e.key === 'o') location.hash = '#/';
    else if (e.key === 'l') location.hash = '#/list';
    else if (e.key === 'c' && S.current === 'exec') { var p = document.querySelector('#peers a.peer'); if (p) location.hash = p.getAttribute('href'); }
  }

  document.addEventListener('DOMContentLoaded', function () {
    window.addEventListener('hashchange', route);
    document.addEventListener('keydown', onKey);
    route();
  });
})();
