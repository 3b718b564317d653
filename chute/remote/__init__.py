"""Remote services chute talks to itself: HTTP (the one place that builds httpx
clients and retries), S3 (listing, HEAD, signed requests) and SigV4 signing."""
