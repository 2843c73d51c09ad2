"""Why is my workload pending: the pure explanation (why), its fact sources and its portal page."""
