"""The Trio shells over real sockets: standalone and ensemble servers, persistence, TLS, SASL."""
