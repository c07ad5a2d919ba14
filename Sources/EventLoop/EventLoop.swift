// Event loop lives here.
