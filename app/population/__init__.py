"""Population runs: a service's decisions over a whole population, on Apache Spark."""
