// deployplane dashboard: live status and log following over the
// dashboard's event streams (EventSource). Every text is set with
// textContent, never parsed as HTML.
(function () {
  "use strict";
  var body = document.body;
  var base = body.getAttribute("data-base") || "";
  var live = body.getAttribute("data-live");

  function badgeClass(s) {
    if (s === "DEPLOYED" || s === "READY") return "badge badge-ok";
    if (/_FAILED$/.test(s) || s === "INTERRUPTED" || s === "UNKNOWN" || s === "DELETED") return "badge badge-fail";
    if (s === "SKIPPED" || s === "UNUSED" || s === "AWAITING_DELETE") return "badge badge-off";
    return "badge badge-wait";
  }

  function each(attr, id, fn) {
    var els = document.querySelectorAll("[" + attr + "]");
    for (var i = 0; i < els.length; i++) {
      if (els[i].getAttribute(attr) === id) fn(els[i]);
    }
  }

  function setBadge(el, status) {
    el.textContent = status;
    el.className = badgeClass(status);
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
  }

  function revisionLink(el, depID, revID) {
    clear(el);
    if (!revID) {
      var none = document.createElement("span");
      none.className = "none";
      none.textContent = "none";
      el.appendChild(none);
      return;
    }
    var a = document.createElement("a");
    a.href = base + "/deployments/" + encodeURIComponent(depID) + "/revisions/" + encodeURIComponent(revID);
    var code = document.createElement("code");
    code.className = "id";
    code.textContent = revID;
    a.appendChild(code);
    el.appendChild(a);
  }

  function fmtTime(iso) {
    var d = new Date(iso);
    if (isNaN(d.getTime())) return iso;
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  function onDeployment(d) {
    if (d.change === "deleted") {
      each("data-dep-status", d.id, function (el) { setBadge(el, "DELETED"); });
      var n = document.getElementById("deleted-notice");
      if (n) n.hidden = false;
      return;
    }
    var shown = false;
    each("data-dep-status", d.id, function (el) { shown = true; setBadge(el, d.status); });
    var nd = document.getElementById("new-deployment");
    if (nd && !shown && d.change === "created") {
      // The list page: a deployment created elsewhere (the API, the CLI).
      var link = document.getElementById("new-deployment-link");
      if (link) link.href = location.pathname + location.search;
      nd.hidden = false;
    }
    each("data-dep-display", d.id, function (el) { if (d.display_name) el.textContent = d.display_name; });
    each("data-dep-image", d.id, function (el) { if (d.image_uri) el.textContent = d.image_uri; });
    each("data-dep-version", d.id, function (el) { if (d.image_version) el.textContent = d.image_version; });
    each("data-dep-active", d.id, function (el) { revisionLink(el, d.id, d.active_revision_id); });
    each("data-dep-latest", d.id, function (el) { revisionLink(el, d.id, d.latest_revision_id); });
    each("data-dep-url", d.id, function (el) {
      if (!d.url || !/^https?:\/\//i.test(d.url)) return;
      clear(el);
      var a = document.createElement("a");
      a.href = d.url;
      a.rel = "noopener noreferrer";
      a.textContent = d.url;
      el.appendChild(a);
    });
  }

  function onRevision(r) {
    var seen = false;
    each("data-rev-status", r.id, function (el) { seen = true; setBadge(el, r.status); });
    each("data-rev-message", r.id, function (el) { el.textContent = r.status_message || ""; });
    each("data-rev-history", r.id, function (el) {
      clear(el);
      (r.status_history || []).forEach(function (c) {
        var li = document.createElement("li");
        li.textContent = c.status;
        el.appendChild(li);
      });
    });
    each("data-rev-timeline", r.id, function (el) {
      clear(el);
      var h = r.status_history || [];
      h.forEach(function (c, i) {
        var li = document.createElement("li");
        var b = document.createElement("span");
        setBadge(b, c.status);
        li.appendChild(b);
        li.appendChild(document.createTextNode(" "));
        var t = document.createElement("time");
        t.dateTime = c.at;
        t.textContent = fmtTime(c.at);
        li.appendChild(t);
        if (i + 1 < h.length) {
          var took = document.createElement("span");
          took.className = "took";
          took.textContent = ((new Date(h[i + 1].at) - new Date(c.at)) / 1000).toFixed(3) + "s";
          li.appendChild(document.createTextNode(" "));
          li.appendChild(took);
        }
        el.appendChild(li);
      });
    });
    if (!seen && (r.change === "created" || (r.change === "snapshot" && location.search.indexOf("rev_offset") < 0))) {
      var n = document.getElementById("new-revision");
      if (n) n.hidden = false;
    }
  }

  var log = document.getElementById("log");
  var lineCount = log ? log.children.length : 0;

  function onLine(l) {
    if (!log || document.getElementById("L-" + l.id)) return;
    var li = document.createElement("li");
    li.id = "L-" + l.id;
    li.setAttribute("data-line", l.id);
    li.className = "lvl-" + String(l.level).toLowerCase();
    var t = document.createElement("time");
    t.dateTime = l.timestamp;
    t.textContent = fmtTime(l.timestamp);
    var lvl = document.createElement("span");
    lvl.className = "lvl";
    lvl.textContent = l.level;
    var msg = document.createElement("span");
    msg.className = "msg";
    msg.textContent = l.message;
    li.appendChild(t);
    li.appendChild(document.createTextNode(" "));
    li.appendChild(lvl);
    li.appendChild(document.createTextNode(" "));
    li.appendChild(msg);
    log.appendChild(li);
    lineCount++;
    var empty = document.getElementById("log-empty");
    if (empty) empty.hidden = true;
    var st = document.getElementById("log-status");
    if (st) st.textContent = lineCount + " lines, following";
    var fe = document.getElementById("first-error");
    if (fe && fe.hidden && (l.level === "ERROR" || l.level === "CRITICAL")) {
      fe.href = "#L-" + l.id;
      fe.hidden = false;
    }
    var follow = document.getElementById("follow");
    if (follow && follow.checked) li.scrollIntoView({ block: "nearest" });
  }

  if (!live || typeof EventSource === "undefined") return;
  var es = new EventSource(live);
  function on(name, fn) {
    es.addEventListener(name, function (e) {
      var v;
      try { v = JSON.parse(e.data); } catch (err) { return; }
      fn(v);
      body.setAttribute("data-live-events", String(Number(body.getAttribute("data-live-events") || "0") + 1));
    });
  }
  on("deployment", function (d) {
    onDeployment(d);
    if (d.change === "deleted") es.close();
  });
  on("revision", onRevision);
  on("line", onLine);
  on("gap", function () { window.location.reload(); });
  es.addEventListener("open", function () { body.setAttribute("data-live-open", "true"); });
  es.addEventListener("error", function () {
    if (es.readyState === EventSource.CLOSED) {
      // 204: the session ended; the reload reaches the sign-in page.
      window.location.reload();
    }
  });
})();
