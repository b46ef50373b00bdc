"""What every role of one server shares: settings (``CoreConfig``), statistics
(``ServerMetrics``, quantiles) and the rate-limited logger. Pure (compiled with mypyc)."""
