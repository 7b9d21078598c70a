"""HTTP and WebSocket routes, one module per area; each router is included by ``edge.service.app.create_app``."""
