// A unit box as OpenCASCADE geometry; meshes/box.step is this file written by `gmsh box_occ.geo -0 -o box.step`.
SetFactory("OpenCASCADE");
Box(1) = {0,0,0,1,1,1};
