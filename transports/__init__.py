"""Transports: SSE, WebSocket and stdio servers and clients. They own IO, timers,
keep-alive, backpressure and cancellation; the core does none of that."""
