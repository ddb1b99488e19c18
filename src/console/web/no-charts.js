window.uPlot = undefined;  // built without uPlot: run scripts/fetch-console-js.sh
