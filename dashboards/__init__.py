"""Panel dashboards over the assistant package (one Viewer per module)."""
