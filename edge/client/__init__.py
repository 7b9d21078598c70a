"""Ground-station client of the edge service: upload a recorded flight, publish a live source (``airpatrol upload``,
``airpatrol stream``). Talks to the service only through its HTTP/WebSocket API."""
