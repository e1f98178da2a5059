// The graph page: fetch the JSON of /api/graph (same origin) and draw it with Cytoscape.js
// (vendored in static/vendor; no request leaves this server). Clicking a note opens it.
const PALETTE = ["#3a6ea5", "#2e7d4f", "#a5702e", "#7a4fb3", "#b3402e", "#2e8a8a", "#8a7a2e",
  "#5b6b8a", "#a53a7a", "#4f7a2e"];

async function draw() {
  const box = document.getElementById("graph");
  const info = document.getElementById("graph-info");
  const res = await fetch(box.dataset.src, { credentials: "same-origin" });
  const data = await res.json();
  if (!res.ok) {
    info.textContent = `${data.error}: ${data.message}`;
    return;
  }
  const kinds = [...new Set(data.nodes.map((n) => n.kind))];
  const elements = [];
  for (const n of data.nodes) {
    // the project map colours clusters; a neighbourhood colours note kinds
    const colour = n.cluster ?? kinds.indexOf(n.kind);
    elements.push({ data: { id: n.id, label: n.label, cluster: colour,
      degree: n.degree ?? 1, root: n.root ? 1 : 0 } });
  }
  for (const e of data.edges) {
    elements.push({ data: { id: `${e.source}>${e.target}`, source: e.source, target: e.target,
      relation: e.relation } });
  }
  const cy = window.cytoscape({
    container: box,
    elements,
    maxZoom: 2,
    minZoom: 0.1,
    style: [
      { selector: "node", style: {
        "background-color": (el) => PALETTE[el.data("cluster") % PALETTE.length],
        "label": "data(label)", "font-size": 9, "color": "#1d2330",
        "width": (el) => 10 + Math.min(30, 3 * el.data("degree")),
        "height": (el) => 10 + Math.min(30, 3 * el.data("degree")),
        "text-wrap": "ellipsis", "text-max-width": 120 } },
      { selector: "node[root = 1]", style: { "border-width": 3, "border-color": "#1d2330" } },
      { selector: "edge", style: { "width": 1, "line-color": "#b8c0cc",
        "target-arrow-shape": "triangle", "target-arrow-color": "#b8c0cc",
        "curve-style": "bezier", "arrow-scale": 0.6 } },
    ],
    layout: { name: "cose", animate: false, randomize: false, padding: 40,
      nodeRepulsion: 400000, idealEdgeLength: 110, nodeOverlap: 40 },
  });
  cy.on("tap", "node", (evt) => { window.location.href = `/note/${evt.target.id()}`; });
  const hubs = (data.hubs || []).map((h) => h.label).slice(0, 5).join(", ");
  info.textContent = `${data.nodes.length} notes, ${data.edges.length} links` +
    (data.clusters !== undefined ? `, ${data.clusters} clusters` : "") +
    (hubs ? `; hubs: ${hubs}` : "");
  box.dataset.drawn = String(data.nodes.length);
}

draw();
