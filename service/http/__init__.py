"""The first phase of a request: the HTTP layer. The middleware (what every response carries, what every request is
counted as, work dropped when its client has gone), the body read and checked once, and multipart parts."""
