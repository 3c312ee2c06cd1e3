"""The real parts on loopback, started and driven one way for the benchmarks and the tests alike: the service as the
image runs it, HAProxy with the edge's configuration, Triton, the container engine, and the clients (ordinary,
vanishing, slow) that they meet. One way, so that what the tests assert about is what the benchmarks measure; here,
apart from bench/, so that the tests stand on this alone and not on the benchmarks' code."""
