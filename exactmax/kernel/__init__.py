"""The trusted kernel: only it can make exactmax say "proved"; it imports only stdlib and flint."""
