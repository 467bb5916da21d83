"""What a crawl reports: `gossamer report`, the end summary, the live progress display."""
