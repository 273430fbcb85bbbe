// esbuild bundles imported stylesheets into the CSS asset.
declare module '*.css';
