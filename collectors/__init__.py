"""Reading the world: /metrics scrape and parse, windows and quantiles, NVML, the load probe."""
