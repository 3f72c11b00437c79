"""Rules about load tests: whether their results can say anything about production."""
