"""Constants torchdata.nodes exports. The Rust threads never poll, so nothing
here sets a timeout; the values are kept for programs that import them."""

QUEUE_TIMEOUT = 0.1
ACK_TIMEOUT = 300
