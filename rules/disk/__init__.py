"""Rules about block devices: their latency and saturation under the database."""
