// Loaded into each measured server (with --expose-gc): SIGUSR2 makes it collect garbage, so that the runner
// samples heap and RSS of live data only. Node leaves SIGUSR2 free unless --heapsnapshot-signal takes it.
process.on('SIGUSR2', () => (globalThis as { gc?: () => void }).gc?.());
