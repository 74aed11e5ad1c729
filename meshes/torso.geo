// A torso-like body for heat conduction: an ellipsoidal body holding two lungs and a heart.
// Physical volumes body, lung_left, lung_right, heart; the outer surface is "skin".
// (Volume In BoundingBox picks the organs: OpenCASCADE boxes of dilated spheres are loose.)
SetFactory("OpenCASCADE");
Sphere(1) = {0, 0, 0, 1};
Dilate {{0, 0, 0}, {1, 0.6, 1.4}} { Volume{1}; }
Sphere(2) = {-0.5, 0, 0.2, 1};
Dilate {{-0.5, 0, 0.2}, {0.28, 0.3, 0.55}} { Volume{2}; }
Sphere(3) = {0.5, 0, 0.2, 1};
Dilate {{0.5, 0, 0.2}, {0.28, 0.3, 0.55}} { Volume{3}; }
Sphere(4) = {0, -0.15, -0.3, 0.2};
BooleanFragments{ Volume{1}; Delete; }{ Volume{2, 3, 4}; Delete; }
lung_left() = Volume In BoundingBox{-1.2, -0.6, -0.5, -0.1, 0.6, 0.9};
lung_right() = Volume In BoundingBox{-0.1, -0.6, -0.5, 1.2, 0.6, 0.9};
heart() = Volume In BoundingBox{-0.25, -0.4, -0.55, 0.25, 0.1, -0.05};
body() = Volume{:};
body() -= {lung_left(), lung_right(), heart()};
Physical Volume("body", 1) = body();
Physical Volume("lung_left", 2) = lung_left();
Physical Volume("lung_right", 3) = lung_right();
Physical Volume("heart", 4) = heart();
Physical Surface("skin", 1) = CombinedBoundary{ Volume{:}; };
Mesh.CharacteristicLengthMax = 0.1;
