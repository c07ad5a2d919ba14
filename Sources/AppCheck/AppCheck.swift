// App Check verification lives here.
