// The explorer's own script: draws an entity's neighbourhood with cytoscape.js and expands
// it a page at a time (/entity/graph). No inline script anywhere: the page's CSP forbids it.
"use strict";

(function () {
  function graphStyle() {
    return [
      { selector: "node", style: {
          "label": "data(label)", "font-size": 10, "color": "#1d2733",
          "text-valign": "bottom", "text-margin-y": 3, "width": "data(size)",
          "height": "data(size)", "background-color": "#6b8fb3" } },
      { selector: "node.center", style: { "background-color": "#c2410c", "font-weight": "bold",
          "font-size": 12 } },
      { selector: "edge", style: { "width": 1, "line-color": "#b8c4d0", "curve-style": "haystack",
          "opacity": 0.8 } },
      { selector: "edge.spoke", style: { "line-color": "#8aa0b8" } },
      { selector: "node:active, node:selected", style: { "overlay-opacity": 0.15 } },
    ];
  }

  function elementsOf(data, seen) {
    var els = [];
    if (!seen[data.center.id]) {
      seen[data.center.id] = true;
      els.push({ group: "nodes", classes: "center",
                 data: { id: data.center.id, label: data.center.name, size: 26 } });
    }
    data.nodes.forEach(function (n) {
      if (seen[n.id]) { return; }
      seen[n.id] = true;
      els.push({ group: "nodes", data: { id: n.id, label: n.name,
                 size: Math.min(10 + 3 * n.weight, 24) } });
    });
    data.edges.forEach(function (e) {
      var key = e[0] + "\u0000" + e[1];
      if (seen[key] || !seen[e[0]] || !seen[e[1]]) { return; }
      seen[key] = true;
      els.push({ group: "edges", classes: e[0] === data.center.id ? "spoke" : "",
                 data: { id: "e" + Object.keys(seen).length, source: e[0], target: e[1],
                         label: e[2] } });
    });
    return els;
  }

  function draw(container, data) {
    var seen = {};
    var next = data.next_offset;
    var button = document.getElementById("graph-more");
    var count = document.getElementById("graph-count");
    var cy = cytoscape({
      container: container, elements: elementsOf(data, seen), style: graphStyle(),
      minZoom: 0.2, maxZoom: 3, wheelSensitivity: 0.3,
    });
    function layout() {
      var run = cy.layout({ name: "concentric", animate: false, fit: true, padding: 20,
        minNodeSpacing: 18, concentric: function (node) {
          return node.hasClass("center") ? 1000 : node.degree(); },
        levelWidth: function () { return 4; } });
      run.one("layoutstop", function () {
        container.setAttribute("data-nodes", String(cy.nodes().length));
        // Milliseconds since the navigation started (benchmarks/explore_latency.py).
        container.setAttribute("data-ready-ms", performance.now().toFixed(1));
        container.setAttribute("data-graph-ready", "true");
      });
      run.run();
    }
    function update() {
      var shown = cy.nodes().length - 1;
      if (count) { count.textContent = shown + " of " + data.total + " neighbours"; }
      if (button) {
        button.hidden = next === null || cy.nodes().length >= data.max_nodes;
        button.disabled = false;
      }
    }
    cy.on("tap", "node", function (evt) {
      var id = evt.target.id();
      if (id !== data.center.id) {
        var url = container.getAttribute("data-entity-url");
        window.location.href = url + (url.indexOf("?") < 0 ? "?" : "&") + "id=" + encodeURIComponent(id);
      }
    });
    if (button) {
      button.addEventListener("click", function () {
        if (next === null) { return; }
        button.disabled = true;
        var url = container.getAttribute("data-graph-url") + "&offset=" + next;
        fetch(url, { headers: { "Accept": "application/json" } })
          .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
          .then(function (page) {
            container.setAttribute("data-graph-ready", "false");
            next = page.next_offset;
            cy.add(elementsOf(page, seen));
            layout();
            update();
          })
          .catch(function () { button.disabled = false; });
      });
    }
    layout();
    update();
  }

  function start() {
    var container = document.getElementById("graph");
    var source = document.getElementById("graph-data");
    if (!container || !source || typeof cytoscape === "undefined") { return; }
    draw(container, JSON.parse(source.textContent));
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
