/* The small map of a flight page: its GPS track, start and end. */
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("map-config").textContent);
  const track = JSON.parse(document.getElementById("flight-track").textContent);
  const el = document.getElementById("flight-map");
  if (!track.features.length) {  // say so instead of an empty world map
    el.classList.add("map-empty");
    el.textContent = "This flight log has no GPS positions: there is nothing to show on a map.";
    el.dataset.loaded = "0";
    return;
  }
  const maxZoom = window.AIRPATROL.MAX_ZOOM;
  const map = L.map(el, {zoomSnap: 0.25, maxZoom: maxZoom});
  L.control.scale({imperial: false}).addTo(map);
  const bases = window.AIRPATROL.baseLayers(map, cfg.basemaps);
  if (Object.keys(bases).length > 1) L.control.layers(bases, null, {collapsed: true}).addTo(map);
  const layer = L.geoJSON(track, {style: {color: "#1f2d3d", weight: 3, className: "flight-track"},
    pointToLayer: (f, ll) => L.circleMarker(ll, {radius: 5, className: "flight-track"})});
  // the view first: Leaflet cannot draw vector layers on a map that has no centre and zoom yet
  const b = layer.getBounds();
  if (b.isValid()) map.fitBounds(b, {padding: [20, 20], maxZoom: maxZoom}); else map.setView([20, 0], 2);
  layer.addTo(map);
  track.features.forEach((f) => {
    if (f.geometry.type !== "LineString") return;
    const c = f.geometry.coordinates;
    L.circleMarker([c[0][1], c[0][0]], {radius: 6, color: "#2b8a3e", fillOpacity: 1}).bindTooltip("start").addTo(map);
    L.circleMarker([c[c.length - 1][1], c[c.length - 1][0]], {radius: 6, color: "#c0392b", fillOpacity: 1}).bindTooltip("end").addTo(map);
  });
  el.dataset.loaded = String(track.features.length);
})();
